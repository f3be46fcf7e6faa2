"""`menger completion bash|zsh`: a shell completion script, generated from the command's own argparse parser.

    eval "$(menger completion bash)"     # in ~/.bashrc
    eval "$(menger completion zsh)"      # in ~/.zshrc, after compinit

It completes the commands, each command's options, an option's choices (`--launcher threads|processes|ray`,
`--algo`), preset names and YAML files where an experiment goes, directories where a run directory goes. The
preset and algorithm names are those installed when the script was made: make it again after installing a plug-in.
zsh runs the bash function through its `bashcompinit` layer, so both shells complete the same way.
"""
from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh")
# positional arguments by what they name: an experiment (a preset or a YAML file), or anything else a path
EXPERIMENT_COMMANDS = ("train", "tune", "config")
# options whose value is a path
PATH_DESTS = ("run_dir", "out", "png", "video_out", "report")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each sub-command of `parser`, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings]


def _words(values) -> str:
    return " ".join(shlex.quote(str(value)) for value in values)


def _value_case(parser: argparse.ArgumentParser, algorithms=()) -> list[str]:
    """`case "$prev"` arms for the options of one command that take a value."""
    arms = []
    for action in _options(parser):
        if action.nargs in (0, "?"):  # a flag, or a value that may be left out (`--supervise [N]`)
            continue
        flags = "|".join(action.option_strings)
        choices = action.choices or (algorithms if action.dest == "algo" else None)
        if choices:
            reply = f'COMPREPLY=($(compgen -W "{_words(choices)}" -- "$cur"))'
        elif action.dest in PATH_DESTS:
            reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
        else:
            reply = "COMPREPLY=()"  # a number, a key=value: nothing to offer
        arms.append(f"        {flags}) {reply}; return 0;;")
    return arms


def bash_script(parser: argparse.ArgumentParser, presets=(), algorithms=()) -> str:
    """The bash completion function `_menger` for `parser`, registered for the `menger` command."""
    commands = subcommands(parser)
    top = [flag for action in _options(parser) for flag in action.option_strings]
    arms = []
    for name, sub in commands.items():
        flags = [flag for action in _options(sub) for flag in action.option_strings] + ["--debug"]
        positionals = [action for action in sub._actions if not action.option_strings]
        if positionals and positionals[0].choices:
            operand = f'COMPREPLY=($(compgen -W "{_words(positionals[0].choices)}" -- "$cur"))'
        elif name in EXPERIMENT_COMMANDS:
            operand = (f'COMPREPLY=($(compgen -W "{_words(presets)}" -- "$cur") $(compgen -d -- "$cur") '
                       '$(compgen -f -X \'!*.y*ml\' -- "$cur"))')
        elif positionals:
            operand = 'COMPREPLY=($(compgen -d -- "$cur"))'
        else:
            operand = "COMPREPLY=()"
        arms += [f"    {name})", '      case "$prev" in', *_value_case(sub, algorithms), "      esac",
                 f'      if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{_words(flags)}" -- "$cur")); '
                 f"else {operand}; fi;;"]
    return "\n".join([
        "# menger shell completion (bash): eval \"$(menger completion bash)\" in ~/.bashrc",
        "_menger() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" command="" i',
        "  for ((i = 1; i < COMP_CWORD; i++)); do",
        '    case "${COMP_WORDS[i]}" in -*) ;; *) command="${COMP_WORDS[i]}"; break;; esac',
        "  done",
        '  if [[ -z "$command" ]]; then',
        f'    COMPREPLY=($(compgen -W "{_words(commands)} {_words(top)}" -- "$cur")); return 0',
        "  fi",
        '  case "$command" in',
        *arms,
        "  esac",
        "}",
        "complete -o filenames -F _menger menger",
        ""])


def zsh_script(parser: argparse.ArgumentParser, presets=(), algorithms=()) -> str:
    """The same completion for zsh, through zsh's bash-completion layer."""
    return "\n".join([
        "# menger shell completion (zsh): eval \"$(menger completion zsh)\" in ~/.zshrc, after compinit",
        "autoload -U +X bashcompinit && bashcompinit",
        bash_script(parser, presets, algorithms).split("\n", 1)[1]])


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    from menger import registry
    from menger.experiment import list_presets

    if shell not in SHELLS:
        raise ValueError(f"no completion for the shell {shell!r}; menger completion knows {', '.join(SHELLS)}")
    make = bash_script if shell == "bash" else zsh_script
    return make(parser, presets=list(list_presets()), algorithms=registry.names())
