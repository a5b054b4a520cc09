"""The torch side of rla-gym: policies, the process reward model, the closed loop and the CLI."""
