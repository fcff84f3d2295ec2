"""Python cells: the second guest language, run by Monty inside the same confined worker."""
