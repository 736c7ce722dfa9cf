"""``python -m pike_harness`` runs the ``pikeh`` CLI (useful where the console script is not on PATH)."""

from pike_harness.cli import main

if __name__ == "__main__":
    main()
