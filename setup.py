from setuptools import find_packages, setup

# Metadata and dependencies live in pyproject.toml; this file exists so that tools and users that
# expect `python setup.py ...` (Sarathi-Serve's own workflow) still find the package.
setup(packages=find_packages(include=["sarathi_ext", "sarathi_ext.*", "predictors", "predictors.*"]))
