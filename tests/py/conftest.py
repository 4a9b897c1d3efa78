import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # latch runs on http://localhost here

from latch_server import Latch, databases  # noqa: E402


@pytest.fixture(scope="session", params=databases())
def latch(request):
    server = Latch(request.param)
    yield server
    server.stop()
