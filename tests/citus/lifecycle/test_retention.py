"""tests/admin/test_retention.py against the Citus cluster."""

import pytest

from tests.admin import test_retention as on_single_node
from tests.citus.lifecycle import collected_again

pytestmark = pytest.mark.citus

globals().update(collected_again(on_single_node))
