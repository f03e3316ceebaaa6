"""``python -m devstack up|down|status|logs|env``: the same commands as ``redstring dev``,
without importing the rest of the project (useful in CI and Makefiles)."""

from devstack.cli import dev

if __name__ == "__main__":
    dev(prog_name="python -m devstack")
