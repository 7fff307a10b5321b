"""Builds the headscope wheel with Python's standard library alone (no setuptools, no wheel
package): a wheel is a zip file of the package and a .dist-info folder holding METADATA,
WHEEL and RECORD (the packaging specifications' binary distribution format).

    python3 python/build_backend.py --lib build/wheel/libheadscope.so.3 --out build
        the self-contained wheel of `make wheel`: the library inside the package
        (headscope/libheadscope.so.3, loaded from there first), tagged py3-none-<platform>
    pip install ./python
        this file as the PEP 517 backend (pyproject.toml): a py3-none-any wheel without the
        library, which then loads the installed one (make install)

OpenBLAS, libpng, cJSON and utf8proc stay system libraries in both (docs/python.md).
"""
import argparse
import base64
import hashlib
import os
import re
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIBNAME = "libheadscope.so.3"
# zip entries' time: SOURCE_DATE_EPOCH when set (reproducible builds), else 1980-01-01
EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    """name, version, summary, requires-python and dependencies from pyproject.toml (read
    with a regular expression: tomllib is Python >= 3.11)."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()

    def field(key):
        m = re.search(r'^%s = "([^"]*)"' % key, text, re.M)
        if not m:
            raise SystemExit("build_backend: pyproject.toml has no %s" % key)
        return m.group(1)
    deps = re.search(r"^dependencies = \[([^\]]*)\]", text, re.M)
    return {"name": field("name"), "version": field("version"),
            "summary": field("description"), "requires_python": field("requires-python"),
            "deps": re.findall(r'"([^"]+)"', deps.group(1)) if deps else []}


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p["summary"], "License: MIT",
             "Requires-Python: " + p["requires_python"]]
    lines += ["Requires-Dist: " + d for d in p["deps"]]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        return "\n".join(lines) + "\n\n" + f.read()


def platform_tag():
    """The platform tag of this interpreter's build (linux_x86_64, linux_aarch64, ...)."""
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def _entry(name):
    date = EPOCH
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde:
        import time
        date = max(time.gmtime(int(sde))[:6], EPOCH)
    return zipfile.ZipInfo(name, date_time=date)


def build(out_dir, lib=None):
    """Writes the wheel into out_dir and returns its file name; lib: the shared library to
    carry (None: a pure wheel that loads the installed library)."""
    p = _project()
    tag = "py3-none-" + platform_tag() if lib else "py3-none-any"
    dist = "%s-%s" % (p["name"], p["version"])
    wheel_name = "%s-%s.whl" % (dist, tag)
    files = []  # (name in the wheel, bytes, mode)
    pkg = os.path.join(HERE, "headscope")
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            with open(os.path.join(pkg, f), "rb") as fh:
                files.append(("headscope/" + f, fh.read(), 0o644))
    if lib:
        with open(lib, "rb") as fh:
            data = fh.read()
        if not data.startswith(b"\x7fELF"):
            raise SystemExit("build_backend: %s is not a shared library" % lib)
        files.append(("headscope/" + LIBNAME, data, 0o755))
    info = dist + ".dist-info/"
    files.append((info + "METADATA", _metadata(p).encode(), 0o644))
    files.append((info + "WHEEL", ("Wheel-Version: 1.0\nGenerator: headscope build_backend.py\n"
                                   "Root-Is-Purelib: %s\nTag: %s\n"
                                   % ("false" if lib else "true", tag)).encode(), 0o644))
    lic = os.path.join(HERE, os.pardir, "LICENSE")
    if os.path.exists(lic):
        with open(lic, "rb") as fh:
            files.append((info + "LICENSE", fh.read(), 0o644))
    record = []
    for name, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "RECORD,,")
    files.append((info + "RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".headscope-wheel-", dir=out_dir)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data, mode in files:
                e = _entry(name)
                e.external_attr = (0o100000 | mode) << 16
                e.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(e, data)
        os.replace(tmp, os.path.join(out_dir, wheel_name))
    except BaseException:
        os.unlink(tmp)
        raise
    return wheel_name


# ---- PEP 517 hooks (pip install ./python) -------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return build(wheel_directory)


def main():
    ap = argparse.ArgumentParser(description="Builds the headscope wheel.")
    ap.add_argument("--lib", help="the shared library to carry inside the package")
    ap.add_argument("--out", required=True, help="folder to write the wheel into")
    a = ap.parse_args()
    print(os.path.join(a.out, build(a.out, a.lib)))


if __name__ == "__main__":
    main()
