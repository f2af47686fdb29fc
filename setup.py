# SPDX-License-Identifier: Apache-2.0
# `pip install .` for the hetgraph Python module, with nothing from outside Debian: Debian's
# pip, setuptools and wheel (python3-pip, python3-setuptools, python3-wheel) build it with the
# project's own CMake, so pip must not fetch a build environment:
#
#   python3 -m venv --system-site-packages venv     # NumPy from Debian's python3-numpy
#   venv/bin/pip install --no-build-isolation .
#   venv/bin/python -c "import hetgraph"
#
# It configures a tree of its own (build/pip: the library, hetgraph-run and the module; no
# tests, examples or benchmarks) unless HETGRAPH_BUILD_DIR names a built tree to take, installs
# it into a staging folder, and puts the module into site-packages with libhetgraph beside it
# in hetgraph.libs/ (the module's run path looks there). The C++ library itself installs with
# `cmake --install` (README.md).
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        tree = os.environ.get("HETGRAPH_BUILD_DIR") or os.path.join(ROOT, "build", "pip")
        if not os.path.exists(os.path.join(tree, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
                            "-DHETGRAPH_BUILD_TESTS=OFF", "-DHETGRAPH_BUILD_EXAMPLES=OFF",
                            "-DHETGRAPH_BUILD_BENCH=OFF", "-DHETGRAPH_PYTHON=ON",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", tree, "--parallel",
                        os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")], check=True)
        stage = os.path.join(os.path.abspath(self.build_temp), "stage")
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.run(["cmake", "--install", tree, "--prefix", stage], check=True,
                       stdout=subprocess.DEVNULL)
        modules = glob.glob(os.path.join(stage, "lib", "python3*", "*-packages", "hetgraph*.so"))
        if len(modules) != 1:
            sys.exit(f"setup.py: {tree} installed {len(modules)} hetgraph modules, not one "
                     "(is pybind11-dev installed? scripts/install-deps.sh test)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(modules[0], target)
        libs = os.path.join(os.path.dirname(target), "hetgraph.libs")
        os.makedirs(libs, exist_ok=True)
        for lib in ("libhetgraph.so.0", "libhetgraph_omp_env.so.0"):  # what the module loads
            found = glob.glob(os.path.join(stage, "lib*", "**", lib), recursive=True)
            shutil.copyfile(found[0], os.path.join(libs, lib))


setup(ext_modules=[Extension("hetgraph", sources=[])], packages=[], py_modules=[],
      cmdclass={"build_ext": CMakeBuild})
