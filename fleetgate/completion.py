"""``fleetgate completion bash|zsh``: shell completion of the commands and their options, made
from the parser itself, so it never lags behind a new option."""

from __future__ import annotations

import argparse

NAMES = ("fleetgate", "kubectl-fleetgate")


def add_parser(commands: argparse._SubParsersAction, parser: argparse.ArgumentParser) -> None:
    completion = commands.add_parser(
        "completion",
        help="print the shell completion script (bash, or zsh through bashcompinit)",
        description="Print a completion script for fleetgate and kubectl-fleetgate. bash: "
        "source <(fleetgate completion bash); zsh: autoload -U +X bashcompinit && "
        "bashcompinit && source <(fleetgate completion zsh).",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(handler=lambda args: _print(parser, args.shell))


def _print(parser: argparse.ArgumentParser, shell: str) -> int:
    print(script(parser, shell))
    return 0


def script(parser: argparse.ArgumentParser, shell: str = "bash") -> str:
    """The completion script of ``parser``'s subcommands and each one's options."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, sub in sorted(commands.choices.items()):
        words = sorted({o for a in sub._actions for o in a.option_strings})
        words += sorted(
            c for a in sub._actions if not a.option_strings and a.choices for c in a.choices
        )
        cases.append(f'    {name}) words="{" ".join(words)}" ;;')
    body = "\n".join(cases)
    names = " ".join(sorted(commands.choices))
    lines = [
        "# fleetgate shell completion (fleetgate completion " + shell + ")",
        "_fleetgate() {",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" words=""',
        "  if [[ $COMP_CWORD -eq 1 ]]; then",
        f'    COMPREPLY=($(compgen -W "{names}" -- "$cur")); return',
        "  fi",
        '  case "${COMP_WORDS[1]}" in',
        body,
        "  esac",
        '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        '  [[ ${#COMPREPLY[@]} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))',
        "}",
        *(f"complete -F _fleetgate {n}" for n in NAMES),
    ]
    return "\n".join(lines)
