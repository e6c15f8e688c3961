"""What every command of lab/ uses: paths, the machine and atomic writes, the command
skeleton and result files, a result as a page shows it, the plotting style, and the
fingerprint of the code a result was computed from."""
