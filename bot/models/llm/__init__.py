"""Chat models behind one narrow interface, built by name: `openai:<model>` or `local:<path>`."""

from bot.models.llm.base import ChatModel, Completion, make_chat_model

__all__ = ["ChatModel", "Completion", "make_chat_model"]
