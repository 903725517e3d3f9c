
import sys

# Where PYTHONDONTWRITEBYTECODE is set, every process the tests start (Ray's workers, the farm run
# as a command) would compile the farm from source, and pytest would rewrite every test module
# again on every run: the test session writes the bytecode caches, which the others read. (This
# package is imported before its conftest.py and before any of the farm.)
sys.dont_write_bytecode = False
