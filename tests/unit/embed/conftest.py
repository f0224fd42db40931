from tests.fakes.fixtures import fake_openai  # noqa: F401
