"""Names the dead-code check (vulture, run by tests/unit/test_layers.py) cannot see used:
each is read by a framework or a library by name, or is part of a wire format."""

from apps.client import base
from apps.demo import speech
from dataflows import ingest, kafka_source
from fakes import protocol
from gpu_worker.backends import random_model
from worldmm.llm import prompts
from worldmm.store import models
from worldmm.wire import keys, schemas

# inspect.signature and help() read these on the generated client methods
base.__qualname__
base.__signature__
# Bytewax: sinks' write_batch and build(step_id, worker_index, worker_count) are its calls;
# the module __getattr__ serves `python -m bytewax.run dataflows.ingest:flow`
ingest.LogSink.build
ingest._LogPartition.write_batch
_.worker_index  # noqa: F821
_.worker_count  # noqa: F821
ingest.__getattr__
# Bytewax drives a fixed-partitioned source through these
kafka_source.IdleKafkaSource.list_parts
kafka_source.IdleKafkaSource.build_part
kafka_source.KafkaPartition.next_batch
kafka_source.KafkaPartition.next_awake
# uvicorn stops a server when should_exit is set; PyAV decodes with thread_type set and
# encodes audio in the stream's layout; tokenizers reads normalizer and pre_tokenizer

_.should_exit  # noqa: F821
_.thread_type  # noqa: F821
_.pix_fmt  # noqa: F821
_.layout  # noqa: F821
random_model.normalizer
random_model.pre_tokenizer
# psycopg reads a connection's prepare_threshold before each execute (worldmm/store/db.py)
_.prepare_threshold  # noqa: F821
# http.server calls do_GET/do_POST/do_DELETE and log_message on test handlers
_.do_GET  # noqa: F821
_.do_POST  # noqa: F821
_.do_DELETE  # noqa: F821
_.log_message  # noqa: F821
# maintainers' steps, named in the test that fails when their output is stale
prompts.write_schemas
speech.write_kept_speech
# fields of rows and of API replies: read by SQL and by the API's clients, not by our code
models.SegmentRow.updated_at
_.created_at  # noqa: F821
_.recall_count  # noqa: F821
_.last_recalled_at  # noqa: F821
keys.AuditPage.next_before
schemas.PurgeResponse.blobs_deleted
schemas.PurgeResponse.cache_keys_deleted
schemas.ForgetResponse.blobs_deleted
schemas.RememberResponse.merged_into
schemas.BudgetOut.daily_tokens
schemas.BudgetOut.remaining_today
schemas.UsageReport.by_day
# the fake provider answers a role with the responder method of its name (getattr)
protocol.ProtocolResponder.consolidation
protocol.ProtocolResponder.cross_scale_rerank
protocol.ProtocolResponder.reasoning_agent
# a pydantic field of a test option model, read through model_dump
_.hidden  # noqa: F821
# click calls a Group's list_commands for --help
_.list_commands  # noqa: F821
# tarfile and io read these by name: a member's mtime, a raw stream's writable(); psycopg
# pages a server-side cursor by its itersize
_.mtime  # noqa: F821
_.writable  # noqa: F821
_.itersize  # noqa: F821
