from tests.fixtures.fake_openai import fake_openai  # noqa: F401
