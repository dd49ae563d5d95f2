"""pytest options of systems/systems_test.py."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser):
    parser.addoption("--binary", default=os.path.join(ROOT, "build", "shardcheck"),
                     help="the shardcheck binary under test")


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: needs the systems' venv (ci/setup-systems)")
