"""The compiled part of the gateway: gateway/transport/_wire.pyx (Cython), the HTTP heads of
the proxy's hot path. Everything else is in pyproject.toml.

The extension is optional: without a C compiler (or Cython) the build goes on without it,
and gateway/transport/wire.py's pure-Python functions are used instead.
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython in the build environment: the pure-Python fallback only
    extensions = []
else:
    extensions = cythonize(
        [Extension("gateway.transport._wire", ["gateway/transport/_wire.pyx"])],
        compiler_directives={"language_level": "3"}, quiet=True)
    for extension in extensions:  # cythonize does not carry it over
        extension.optional = True  # a failed compile is a warning: the fallback is used

setup(ext_modules=extensions)
