"""tests/admin/test_users_and_audit.py against the Citus cluster."""

import pytest

from tests.admin import test_users_and_audit as on_single_node
from tests.citus.lifecycle import collected_again

pytestmark = pytest.mark.citus

globals().update(collected_again(on_single_node))
