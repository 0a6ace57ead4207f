"""Adapters that make other frameworks' work durable inside a step.

Each lives in its own module, imported only when asked for, and needs its own extra:

- ``durable_steps.integrations.pydantic_ai`` (``pip install 'durable-steps[pydantic-ai]'``):
  a Pydantic AI agent whose model requests and tool calls are durable calls.
- ``durable_steps.integrations.openai_agents`` (``pip install 'durable-steps[openai-agents]'``):
  OpenAI Agents SDK runs whose model responses, tool calls, handoffs and guardrails are
  durable calls.
- ``durable_steps.integrations.agent_framework`` (``pip install 'durable-steps[agent-framework]'``):
  a Microsoft Agent Framework ``CheckpointStorage`` on any of our stores.

``import durable_steps`` imports none of them. They use only the public
``durable_steps`` surface (``call_async``, ``current_step``, the errors). What the
three share -- the check of a framework's release against the extra's range, the step
running here -- is ``_common``.
"""
