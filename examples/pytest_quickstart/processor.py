"""The processor under test: copy every record of partition ``in-0`` to the sink ``out``.

It resumes where its offset store says, so a restart after a crash neither skips nor, mostly,
repeats records. Or so it claims: ``test_processor.py`` checks the claim, at-least-once.
"""

from harness import Context


def forward(ctx: Context) -> None:
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):  # resume from the stored offset
        ctx.offsets.put("in-0", record.next)  # remember: this record is done
        out.emit(record)
        out.commit()  # the output is durable only now
