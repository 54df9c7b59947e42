"""botocore / aiobotocore Bedrock runtime streams: ``converse_stream`` (surface ``converse``) and
``invoke_model_with_response_stream`` (an Anthropic model's: ``messages``; another family's: ``converse`` events read
as an unsupported payload). ``api_call``: the call (its beginning, its send, its failure before a stream exists, the
stream handed over); ``pulls``: the caller's iteration of botocore's ``EventStream`` and its close; ``failures``:
what an exception that ended one means; ``patch_points``: the patches, gathered."""
