"""The code the foundation pages teach, one module a page, sized to its page.

Plain torch, using only what its page and the pages before it explain; nothing
in the rest of the package imports it. A later page's idea arrives as a visible
change of code the reader already has. The package's own layers compute the
same functions."""
