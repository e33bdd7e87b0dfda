"""The review page's tables in the service database (created with the store's own, `queue/store.py`)."""

from __future__ import annotations

REVIEW_SCHEMA = """
CREATE TABLE IF NOT EXISTS review_sessions (
    id_hash TEXT PRIMARY KEY, login TEXT NOT NULL, operator INTEGER NOT NULL, token TEXT,
    repos TEXT NOT NULL, csrf TEXT NOT NULL, checked_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS review_ratings (
    id {serial} PRIMARY KEY, delivery_id TEXT NOT NULL, repo TEXT NOT NULL, number INTEGER NOT NULL,
    author TEXT NOT NULL, useful INTEGER NOT NULL, source TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (delivery_id, author, source));
CREATE INDEX IF NOT EXISTS review_ratings_by_repo ON review_ratings (repo);
CREATE TABLE IF NOT EXISTS backtests (
    repo TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS comment_html (
    delivery_id TEXT PRIMARY KEY, repo TEXT NOT NULL, digest TEXT NOT NULL, html TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reaction_reads (
    comment_id BIGINT PRIMARY KEY, repo TEXT NOT NULL, read_at DOUBLE PRECISION NOT NULL);
"""
