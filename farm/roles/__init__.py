"""The agent-driven roles (simulator, validator, generator, reporter): the role player, its types, the role cache, the services a conversation uses."""
