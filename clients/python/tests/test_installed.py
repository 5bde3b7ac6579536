"""When $HUTCH_PY_VENV names the venv the package was installed into (as
TestPythonClient does), these tests hold that the hutch_client imported is
that install, whole, and not a copy of the sources that happens to lie on
sys.path.
"""

import importlib.metadata
import os
import unittest

import hutch_client
import hutch_client.aio


class InstalledTest(unittest.TestCase):
    def setUp(self):
        self.venv = os.environ.get("HUTCH_PY_VENV")
        if not self.venv:
            self.skipTest("HUTCH_PY_VENV names no venv the package was installed into")

    def test_imported_from_the_venv(self):
        venv = os.path.realpath(self.venv) + os.sep
        for mod in (hutch_client, hutch_client.aio):
            path = os.path.realpath(mod.__file__)
            self.assertTrue(path.startswith(venv), "%s is imported from %s, not from the venv %s"
                            % (mod.__name__, path, venv))
        pkg = os.path.dirname(os.path.realpath(hutch_client.__file__))
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")), "py.typed was not installed")

    def test_metadata(self):
        self.assertEqual(importlib.metadata.version("hutch-client"), hutch_client.__version__)
        meta = importlib.metadata.metadata("hutch-client")
        self.assertEqual((meta["Name"], meta["Requires-Python"], meta["License"]),
                         ("hutch-client", ">=3.9", "Apache-2.0"))
        self.assertEqual(importlib.metadata.requires("hutch-client"), None)


if __name__ == "__main__":
    unittest.main()
