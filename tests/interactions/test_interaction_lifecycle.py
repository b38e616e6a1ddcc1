"""Interactions as the agent loop drives them: start, answer each assistant turn, finalize. Gsm8kInteraction is
scored by the real GSM8K rule (no mocks): a wrong answer asks for another try, a right one ends with reward 1."""

import asyncio

import pytest

from verl.interactions import BaseInteraction, Gsm8kInteraction
from verl.interactions.gsm8k_interaction import INCORRECT


def test_a_wrong_then_right_conversation():
    interaction = Gsm8kInteraction({"name": "gsm8k"})

    async def main():
        instance_id = await interaction.start_interaction("r0", name="gsm8k", query="6*12?", ground_truth="72")
        messages = [{"role": "user", "content": "What is 6*12?"}, {"role": "assistant", "content": "#### 62"}]
        first = await interaction.generate_response(instance_id, messages)
        messages += [{"role": "user", "content": first[1]}, {"role": "assistant", "content": "Sorry. #### 72"}]
        second = await interaction.generate_response(instance_id, messages)
        state = dict(interaction._instance_dict[instance_id])
        await interaction.finalize_interaction(instance_id)
        return first, second, state

    first, second, state = asyncio.run(main())
    assert first == (False, INCORRECT, 0.0, {})
    assert first[1] == "Your response is incorrect! You need to reflect on your answer and try again."
    assert second == (True, "Your response is correct!", 1.0, {})
    assert state == {"response": "Sorry. #### 72", "ground_truth": "72", "reward": 1.0}
    assert interaction._instance_dict == {}


def test_an_answer_without_the_marker_is_wrong_under_the_strict_rule():
    interaction = Gsm8kInteraction({})

    async def main():
        instance_id = await interaction.start_interaction(ground_truth="72")
        return await interaction.generate_response(instance_id, [{"role": "assistant", "content": "72"}])

    assert asyncio.run(main())[:3] == (False, INCORRECT, 0.0)
    assert interaction.name == "interaction_agent"


def test_trajectories_keep_separate_state():
    interaction = Gsm8kInteraction({"name": "gsm8k"})

    async def main():
        a = await interaction.start_interaction(ground_truth="1")
        b = await interaction.start_interaction(ground_truth="2")
        return await asyncio.gather(
            interaction.generate_response(a, [{"role": "assistant", "content": "#### 1"}]),
            interaction.generate_response(b, [{"role": "assistant", "content": "#### 1"}]),
        )

    (done_a, *_), (done_b, *_) = asyncio.run(main())
    assert done_a is True and done_b is False


def test_finalizing_an_unknown_instance_is_a_key_error():
    with pytest.raises(KeyError):
        asyncio.run(Gsm8kInteraction({}).finalize_interaction("never-started"))


def test_the_base_interaction_ends_the_conversation():
    base = BaseInteraction({"name": "user"})

    async def main():
        instance_id = await base.start_interaction()
        return instance_id, await base.generate_response(instance_id, []), await base.calculate_score()

    instance_id, response, score = asyncio.run(main())
    assert len(instance_id) == 36 and response == (True, "", 0.0, {}) and score == 0.0
