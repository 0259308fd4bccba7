"""The package's version: the project's one semantic version, CMake's
project(VERSION) in CMakeLists.txt. pyproject.toml reads it from here, and
the version_consistency test fails when the two differ."""

__version__ = "0.1.0"
