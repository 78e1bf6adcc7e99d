"""A/B of code paths: fast paths against their general routes, two source trees, kept values, side by side."""
