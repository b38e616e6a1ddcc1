import os

import pytest

from verl.utils.py_functional import temp_env_var


def test_temp_env_var_restores_old_value_or_absence(monkeypatch):
    monkeypatch.setenv("VERL_T_SET", "old")
    monkeypatch.delenv("VERL_T_UNSET", raising=False)
    with pytest.raises(RuntimeError):
        with temp_env_var("VERL_T_SET", "new"), temp_env_var("VERL_T_UNSET", ""):
            assert os.environ["VERL_T_SET"] == "new" and os.environ["VERL_T_UNSET"] == ""
            raise RuntimeError
    assert os.environ["VERL_T_SET"] == "old" and "VERL_T_UNSET" not in os.environ
