"""Tools around the backend, not run in production: demo, benchmarks, fuzzer, soak, Matgo arena,
RTP reports, deploy helpers, audit, reference station and settlement clients."""
