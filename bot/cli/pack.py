"""`ddl-triage pack build|info|verify`: the shipped case pack from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

pack_app = typer.Typer(no_args_is_help=True, help="The case pack: the text-free triage knowledge that ships.")

PackArg = Annotated[Path | None, typer.Argument(help="A pack file (default: the shipped one, or DDL_TRIAGE_PACK).")]


@pack_app.command("build")
def build(
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Gold data directory (default: "
                                                  "../shared/data/gold beside the checkout).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where to write the pack (default: the shipped "
                                             "one in packs/).")] = None,
) -> None:
    """Fit the default predictor on the gold files and write its pack (byte-identical for the same input)."""
    from bot.cli.main import load_settings, progress_bar
    from bot.core.paths import CHECKOUT_DIR, default_data_dir
    from bot.models.pack import build_pack

    settings = load_settings(data_dir or default_data_dir() or Path("../shared/data/gold"))
    target = out or CHECKOUT_DIR / "packs" / f"{settings.taxonomy}.npz"
    with progress_bar() as update:
        pack = build_pack(settings, target, progress=update)
    typer.echo(f"pack: {pack.manifest['cases']} cases from {settings.data_dir} -> {target} "
               f"({target.stat().st_size // 1024} KiB)", err=True)


@pack_app.command("info")
def info(path: PackArg = None) -> None:
    """Print what a pack holds: hashes, taxonomy, model, predictor, data files, library versions."""
    from bot.cli.main import load_settings
    from bot.models.pack import describe_pack, load_pack, pack_path

    typer.echo(json.dumps(describe_pack(load_pack(path or pack_path(load_settings()))), indent=2))


@pack_app.command("verify")
def verify(
    path: PackArg = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Gold data directory to compare with "
                                                  "(default: ../shared/data/gold beside the checkout).")] = None,
) -> None:
    """Exit 1 with one line when the pack is damaged, of another taxonomy, or built from other data."""
    from bot.cli.main import load_settings
    from bot.core.paths import default_data_dir
    from bot.knowledge.taxonomy import load_taxonomy
    from bot.models.pack import check_in_step, load_pack, pack_path

    settings = load_settings(data_dir or default_data_dir())
    pack = load_pack(path or pack_path(settings), load_taxonomy(settings.taxonomy))
    check_in_step(pack, settings.data_dir)
    typer.echo(f"pack {pack.path}: in step with {settings.data_dir}", err=True)
