"""`kcm watcher` flags (placeholder until the watcher lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    del sub
