"""Module paths of releases before the tagging/classification layout, each one file here.

``textorch/__init__.py`` puts this folder on the package's search path, so ``import
textorch.config`` finds ``config.py`` here, which hands back the module that now holds that
code (``textorch.tagging.config``): both names are then one module object. Nothing outside
textorch's own names is touched.
"""
