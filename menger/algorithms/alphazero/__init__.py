"""AlphaZero: its registry entry (`spec`), self-play games (`games`), the search actors act with (`acting`), pure
losses and targets (`losses`), the learner with its replay of positions (`learning`) and builder."""
