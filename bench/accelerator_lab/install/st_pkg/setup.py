from setuptools import Extension, setup

# optional=True: a failed compile is a warning and the package installs without the module (wrapt does the same)
setup(ext_modules=[Extension("tinyacc._speed", ["tinyacc/_speed.c"], optional=True)])
