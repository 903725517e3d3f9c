"""What a run is given: test cases, loading, validation, inputs, script tests, generation."""
