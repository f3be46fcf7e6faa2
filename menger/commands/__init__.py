"""Commands on a finished run: `menger eval` (evaluate), `menger match` (match), `menger export` (export),
`menger plot` (plot). Each reads a run directory through `menger.api`; none trains."""
