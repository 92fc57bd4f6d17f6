"""jsonltape behind the session/history seams of agent frameworks.

One module per framework, each an optional extra (``pip install 'jsonltape[openai-agents]'``,
``'jsonltape[langchain]'``, ``'jsonltape[pydantic-ai]'``). Importing this package imports no
framework; a module imports its framework when it is imported itself. The event log stays the
truth: what a framework calls "delete" is a retraction, and what it reads back is the fold.
"""

__all__: list[str] = []
