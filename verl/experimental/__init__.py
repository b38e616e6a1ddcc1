"""verl's experimental namespace: the agent loop lives here under verl's import path (``verl.experimental.agent_loop``)."""
