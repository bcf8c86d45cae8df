"""FROM: every stage whose base is an external image (not `scratch`, not another stage) names it by digest."""

from __future__ import annotations

from envpin.audit.check import Check, Context, RunRule
from envpin.audit.rule import EXAMPLE_BASE, EXAMPLE_DIGEST, Rule
from envpin.errors import param
from envpin.portable import imageref

_PIN_DOCS = (
    "Docker: pin base image versions",
    "https://docs.docker.com/build/building/best-practices/#pin-base-image-versions",
)

FROM_LATEST = Rule(
    id="from-latest",
    severity="error",
    title="FROM uses :latest, another floating tag, or no tag",
    finds="`FROM` with `:latest`, another floating tag (first or last `-` word `latest`, `nightly`, `devel`, `dev`, "
    "`edge`, `stable`, `rolling`, `main` or `master`: `latest-gpu`, `nightly`, `devel-gpu-py3`) or no tag "
    "(and no digest).",
    why="A base named by :latest (or by no tag, which means :latest) or by another tag that follows a moving "
    "line (latest-gpu, nightly, devel-gpu, ...) is whatever was pushed last: the same Dockerfile builds "
    "a different image next month. Name the exact release tag and pin its digest: "
    "FROM image:TAG@sha256:...",
    bad="FROM tensorflow/tensorflow:latest-gpu\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    good=f"FROM tensorflow/tensorflow:2.15.0-gpu@{EXAMPLE_DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    autofix="Pins the digest the registry reports for the tag now (no tag: `:latest`), keeping flags and `AS name`. "
    "That freezes today's image, the one the next build would pull anyway; choosing a release tag is "
    "still yours. Registry errors stop the run (exit 2, nothing written); `--no-resolve` leaves a comment "
    "instead.",
    references=(_PIN_DOCS, ("`--fix`", "#--fix")),
    fixable=True,
)

FROM_NO_DIGEST = Rule(
    id="from-no-digest",
    severity="warning",
    title="FROM pins a tag but not a digest",
    finds="`FROM image:tag` without `@sha256:`.",
    why="Tags are mutable: NVIDIA and Docker Hub re-push tags with security fixes. Append the digest "
    "the tag points to now (`envpin audit --fix` resolves it through the registry).",
    bad="FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    good=EXAMPLE_BASE,
    autofix="Rewrites the line to `FROM image:tag@sha256:…` with the digest the registry reports for the tag now, "
    "keeping flags and `AS name`: the image the next build would pull, now fixed. Registry errors stop the "
    "run (exit 2, nothing written); `--no-resolve` leaves a comment instead.",
    references=(_PIN_DOCS, ("`--fix`", "#--fix")),
    fixable=True,
)

FROM_UNRESOLVED = Rule(
    id="from-unresolved",
    severity="warning",
    title="FROM depends on a build argument without a value",
    finds="`FROM` uses an `ARG` that has no value: the base is chosen at build time.",
    why="The base image is chosen by whoever runs the build, so the audit cannot check it and the "
    "image cannot be reproduced from the Dockerfile alone. Give the ARG a default (pinned by "
    "digest), or pass --build-arg to the audit.",
    bad="ARG NGC_RELEASE\n"
    "FROM nvcr.io/nvidia/tensorflow:${NGC_RELEASE}-tf2-py3\n"
    "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    good=f"ARG BASE=nvcr.io/nvidia/tensorflow:22.03-tf2-py3@{EXAMPLE_DIGEST}\n"
    "FROM ${BASE}\n"
    "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    autofix="Leaves a comment: which base the build should use is a decision, not a mechanical fix.",
    references=(
        (
            "Docker: how ARG and FROM interact",
            "https://docs.docker.com/reference/dockerfile/#understand-how-arg-and-from-interact",
        ),
    ),
)

RULES: tuple[Rule, ...] = (FROM_LATEST, FROM_NO_DIGEST, FROM_UNRESOLVED)

#: Words that make a tag follow a moving line rather than name a release (latest-gpu, nightly, devel-gpu-py3).
FLOATING_WORDS = frozenset({"latest", "nightly", "devel", "edge", "stable", "rolling", "main", "master", "dev"})


def floating_tag(tag: str) -> bool:
    """A tag that names a moving line: its first or last '-'-separated word is latest, nightly, devel..."""
    words = tag.lower().split("-")
    return words[0] in FLOATING_WORDS or words[-1] in FLOATING_WORDS


def _stock_tag_hint(name: str) -> str | None:
    """For Docker Hub's tensorflow/tensorflow: the newest stock GPU tag envpin's catalog knows, as an example of an
    exact tag (envpin.knowledge.stock); None for any other repository."""
    from envpin.errors import EnvpinError
    from envpin.knowledge import stock

    try:
        if imageref.parse(name).name != f"docker.io/{stock.REPOSITORY}":
            return None
        newest = stock.load().entries[0]
    except (imageref.RefError, EnvpinError, IndexError):
        return None
    return (
        f"name an exact release tag and pin its digest, e.g. FROM {name}:{newest.tag}@sha256:… "
        f"(TensorFlow {newest.tf_version}; `{param('stock', command='catalog')}` lists the stock GPU images "
        "envpin knows)"
    )


def _pin_hint(image: str, name: str, tag: str, fixes: str) -> str:
    """Where envpin knows the tag as a stock TensorFlow GPU image, say that `envpin build --stock` pins it too
    (`fixes`: how the audit's fix is named, param("fix", command="audit"), worked out once per audit)."""
    from envpin.errors import EnvpinError
    from envpin.knowledge import stock

    fix = f"pin the digest the tag points to now: FROM {image}@sha256:… ({fixes})"
    try:
        known = stock.names_stock_tag(f"{name}:{tag}") and tag in stock.load().tags()
    except EnvpinError:  # a damaged table only loses the hint, never a finding
        known = False
    return f"{fix}, or let `{param('stock', command='build')} {tag}` pin it" if known else fix


def check_from(ctx: Context) -> None:
    """Every stage's external base: unresolved, floating, or a tag without a digest."""
    names = {s.name for s in ctx.df.stages if s.name}
    fixes, build_args = param("fix", command="audit"), param("build_args")
    for st in ctx.df.stages:
        if st.parent is not None or st.image.lower() == "scratch":
            continue
        line = st.from_.line
        if st.unresolved:
            args = ", ".join(st.unresolved)
            ctx.add(
                FROM_UNRESOLVED,
                line,
                f"FROM {st.image_raw}: build argument {args} has no value, so the base is chosen at build time",
                f"give ARG {st.unresolved[0]} a default pinned by digest, or audit with {build_args}",
            )
            continue
        if st.image.lower() in names:
            continue
        name, tag, digest = imageref.split(st.image)
        if digest:
            continue
        if tag is None or floating_tag(tag):
            what = "no tag (that is :latest)" if tag is None else f"the floating tag :{tag}"
            ctx.add(
                FROM_LATEST,
                line,
                f"FROM {st.image} uses {what}: the base changes whenever it is re-pushed",
                _stock_tag_hint(name) or f"name an exact tag and pin its digest: FROM {name}:TAG@sha256:…",
            )
        else:
            ctx.add(
                FROM_NO_DIGEST,
                line,
                f"FROM {st.image} is not pinned by digest; the tag can be re-pushed",
                _pin_hint(st.image, name, tag, fixes),
            )


CHECKS: tuple[Check, ...] = (check_from,)
RUN_RULES: tuple[type[RunRule], ...] = ()
