"""JAX runs in 64-bit mode so that it computes in the same dtype as the CatML programs."""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
