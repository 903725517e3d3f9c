"""The agent-driven roles (simulator, validator, generator, reporter): the role player, its types, the role cache,
the services a conversation uses, and the two uses of roles that make cases: generation and script tests."""
