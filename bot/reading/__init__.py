"""Reading the report: the issue's text normalised once (`normalise`), its tracebacks, exit codes and log lines,
its error signatures, the title's and template's cues, and the opening post as GitHub held it (`opening`)."""
