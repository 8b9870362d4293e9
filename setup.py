# The native part of the `ncclguard` Python package (metadata: pyproject.toml).
#
# Building a wheel (from the sdist at `pip install`, or `python -m build`) runs the existing
# Makefile (`make lib tools`) into a private build directory with the system C compiler, and puts
# into the package:
#   ncclguard/lib/libncclguard.so                       the library
#   ncclguard/bin/ncclguard-run, -doctor, -report        the tools (the launcher is the versioned copy)
#   ncclguard/libexec/ncclguard/ngtest, faults, repeat, torch_symm.py   the scenarios of ncclguard-doctor --probe
#                                                       (header-free: NCCL and CUDA opened at run time)
#   ncclguard/bin/python/                               the launcher's Python hook directory
#                                                       (sitecustomize.py + ncclguard_hook), as in build/
#   ncclguard/_version.py                               __version__, from VERSION
#   ncclguard.pth                                       start-up activation (NCCLGUARD=1), site-packages root
#   ncclguard/docs/                                     the documentation a user reads (DOCS below), in the
#                                                       source tree's layout; python -m ncclguard --docs
# The binaries need libc alone. CC and CFLAGS are taken from the environment (defaults: cc, -O2 -g);
# the package build leaves -Werror out (a newer compiler's new warning must not stop an install)
# and uses no NCCL or CUDA header.
import glob
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import ExecError

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("ncclguard-run", "ncclguard-doctor", "ncclguard-report")

# The start-up file: one line, executed by site.py at every start of this environment's Python.
# Without NCCLGUARD (or with a false value: the table's words in any case) it costs one dictionary
# lookup and imports nothing; any other value imports the package, whose switch() judges it as the
# launcher and the doctor do (a value that is not valid: refused, status 2; NCCLGUARD_STRICT=0: one
# warning, not turned on).
PTH = 'import os; os.environ.get("NCCLGUARD", "0").lower() not in ("0", "false", "no", "off") and __import__("ncclguard")\n'


# The documentation installed with the package, into ncclguard/docs/ with the source tree's layout (so
# that the links between these files work, and a path the tools' --help names, such as
# tools/README.md or docs/NCCL.md, is that path under the folder `python -m ncclguard --docs` prints).
# With them the pages they link: the GPU results the manual cites as evidence and the test suite's
# overview (tests/README.md and the result files it links), so that every relative link of a shipped
# page resolves inside the package (tests/t_package.sh checks it).
DOCS = ("README.md", "CHANGELOG.md", "LICENSE", "docs/*.md", "tools/README.md", "tools/python/README.md",
        "tests/README.md", "tests/gpu/README.md", "tests/gpu/results/*.md", "tests/bench/RESULTS.md",
        "tests/failpoints-RESULTS.md", "tests/mutate/RESULTS.md")

DOCS_NOTE = ("> Installed with pip, the documentation this page names (README.md, CHANGELOG.md, docs/, "
             "tools/README.md, tools/python/README.md, the GPU results under tests/gpu/results/) is in the "
             "package: `python -m ncclguard --docs` prints its folder.")


def long_description():
    """README.md for the package index: the project has no public URL, so a relative link, which
    would be broken there, becomes the path it names (a file installed with the package, DOCS), and
    one line after the title says where those are."""
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        text = f.read()

    def plain(m):
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)  # https:, mailto:, an anchor of this page
        path = target.split("#")[0]
        return label if label.strip("`") == path else "%s (`%s`)" % (label, path)

    text = re.sub(r"\[([^\]\n]+)\]\(([^)\s]+)\)", plain, text)
    title, _, rest = text.partition("\n")
    return "%s\n\n%s\n%s" % (title, DOCS_NOTE, rest)


def fail(msg):
    """One line, no traceback (setuptools prints 'error: ' + msg and exits 1)."""
    raise ExecError("ncclguard: " + msg)


def revision():
    """The revision, as the Makefile takes it: git when this directory is the top of its own
    repository (never an enclosing one's), else REVISION (written into the sdist), else '' (none:
    the identity is then "ncclguard VERSION" alone)."""
    try:
        top = subprocess.run(["git", "-C", HERE, "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(HERE):
            rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True, check=True).stdout.strip()
            if rev:
                return rev
    except (OSError, subprocess.CalledProcessError):
        pass
    p = os.path.join(HERE, "REVISION")
    if os.path.exists(p):
        with open(p) as f:
            r = f.readline().strip()
            return "" if r == "unknown" else r
    return ""


def check_toolchain(cc, cflags):
    """A missing compiler, make or uthash is one line naming the Debian package."""
    argv = shlex.split(cc)
    if not argv or shutil.which(argv[0]) is None:
        fail("no C compiler (%s) found: install one (Debian/Ubuntu: apt-get install build-essential), "
             "or set CC" % cc)
    if shutil.which("make") is None:
        fail("make not found: install it (Debian/Ubuntu: apt-get install build-essential)")
    with tempfile.TemporaryDirectory() as d:
        def compiles(src):
            c = os.path.join(d, "t.c")
            with open(c, "w") as f:
                f.write(src)
            r = subprocess.run(argv + shlex.split(cflags) + ["-c", c, "-o", os.path.join(d, "t.o")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return r.returncode == 0
        if not compiles("int ncclguard_probe(void) { return 0; }\n"):
            fail("the C compiler (%s) does not work: install one (Debian/Ubuntu: apt-get install "
                 "build-essential), or set CC" % cc)
        if not compiles("#include <uthash.h>\nint ncclguard_probe;\n"):
            fail("uthash.h not found: install uthash (Debian/Ubuntu: apt-get install uthash-dev; "
                 "elsewhere put uthash.h on the include path, e.g. CFLAGS=-I/dir)")


class BuildPy(build_py):
    """Python files as usual, then the library and the tools through the Makefile."""

    def run(self):
        cc = os.environ.get("CC") or "cc"
        cflags = os.environ.get("CFLAGS") or "-O2 -g"
        check_toolchain(cc, cflags)
        bdir = os.path.abspath(os.path.join(self.get_finalized_command("build").build_temp, "make"))
        shutil.rmtree(bdir, ignore_errors=True)  # never objects of another compiler or CFLAGS
        jobs = str(min(8, os.cpu_count() or 1))
        cmd = ["make", "-C", HERE, "-s", "-j" + jobs, "BUILD=" + bdir, "CC=" + cc, "CFLAGS=" + cflags,
               "WARN=-Wall -Wextra", "NCCL_INCLUDE=", "CUDA_INCLUDE=", "NG_REVISION=" + revision(),
               "lib", "tools"]
        self.announce("ncclguard: " + " ".join(shlex.quote(a) for a in cmd), level=2)
        if subprocess.run(cmd).returncode != 0:
            fail("building the library failed (make lib tools, output above)")
        super().run()  # after make: it generates ncclguard_hook/_vars.py
        pkg = os.path.join(self.build_lib, "ncclguard")
        os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        self.copy_file(os.path.join(bdir, "libncclguard.so"), os.path.join(pkg, "lib", "libncclguard.so"))
        for t in TOOLS:
            self.copy_file(os.path.join(bdir, t), os.path.join(pkg, "bin", t))
        # The probe's scenario programs (make tools builds them into probe/), where ncclguard-doctor
        # --probe looks: ../libexec/ncclguard from bin/, as after make install.
        probe_src = os.path.join(bdir, "probe")
        probe_dst = os.path.join(pkg, "libexec", "ncclguard")
        os.makedirs(probe_dst, exist_ok=True)
        for p in sorted(os.listdir(probe_src)):
            src = os.path.join(probe_src, p)
            if os.path.isfile(src) and ((os.access(src, os.X_OK) and "." not in p) or p.endswith(".py")):
                self.copy_file(src, os.path.join(probe_dst, p))
        # The launcher's hook directory (it looks for ./python next to itself): as tools/python.
        hook_src = os.path.join(HERE, "tools", "python")
        hook_dst = os.path.join(pkg, "bin", "python")
        os.makedirs(hook_dst, exist_ok=True)
        self.copy_file(os.path.join(hook_src, "sitecustomize.py"), os.path.join(hook_dst, "sitecustomize.py"))
        os.makedirs(os.path.join(hook_dst, "ncclguard_hook"), exist_ok=True)
        for f in sorted(os.listdir(os.path.join(hook_src, "ncclguard_hook"))):
            if f.endswith(".py"):
                self.copy_file(os.path.join(hook_src, "ncclguard_hook", f),
                               os.path.join(hook_dst, "ncclguard_hook", f))
        with open(os.path.join(pkg, "_version.py"), "w") as f:
            f.write("# written by setup.py from VERSION\n__version__ = %r\n__revision__ = %r\n"
                    % (self.distribution.get_version().strip(), revision()))
        with open(os.path.join(self.build_lib, "ncclguard.pth"), "w") as f:
            f.write(PTH)
        for pattern in DOCS:
            for src in sorted(glob.glob(os.path.join(HERE, pattern))):
                dst = os.path.join(pkg, "docs", os.path.relpath(src, HERE))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                self.copy_file(src, dst)


class Sdist(sdist):
    """Records the git revision in the sdist (REVISION), so a build from it names its revision."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        p = os.path.join(base_dir, "REVISION")
        rev = revision()
        if os.path.exists(p):
            os.unlink(p)  # a hard link to ours: never write through it
        if rev:  # none known: no file, and a build from the sdist names none
            with open(p, "w") as f:
                f.write(rev + "\n")


class BdistWheel(bdist_wheel):
    """Platform-specific (a native library), but no Python extension: one wheel, py3-none-PLATFORM."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPy, "sdist": Sdist, "bdist_wheel": BdistWheel},
    options={"build": {"build_base": "build-py"}},
    long_description=long_description(),
    long_description_content_type="text/markdown",
)
