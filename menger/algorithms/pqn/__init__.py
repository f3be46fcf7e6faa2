"""PQN: its registry entry (`spec`), network, pure losses, learner (`learning`) and builder."""
