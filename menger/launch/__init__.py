"""Launchers place the same actors on threads or local processes; the experiment does not know which."""
from menger.launch.local import ProcessLauncher, ThreadLauncher, make_launcher

__all__ = ["ProcessLauncher", "ThreadLauncher", "make_launcher"]
