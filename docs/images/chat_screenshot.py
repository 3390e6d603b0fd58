"""Make the README's screenshot from a real run: `specmon chat`'s app against the built-in simulator
(degradation schedule "2 fast, 1 degraded", so the third answer runs at vanilla speed), three
prompts typed through Textual's Pilot, then Textual's SVG export. Convert to PNG with
`rsvg-convert -z 0.6 docs/images/chat.svg -o docs/images/chat.png`, and look at it.

Usage: python docs/images/chat_screenshot.py [OUT_DIR]   (default docs/images)
"""

from __future__ import annotations

import asyncio
import sys

from specmon.runtime.baseline import state_factory
from specmon.runtime.monitor import Target
from specmon.runtime.session import CollectorProcess, SessionConfig
from specmon.sim.server import SimConfig, start_in_thread
from specmon.ui.app import SpecmonApp
from specmon.ui.conversation import ChatSettings
from specmon.ui.live_port import LivePort
from specmon.ui.widgets.answer import AnswerView

PROMPTS = (
    "What does speculative decoding buy me?",
    "Show me how AL is computed.",
    "And when does it not help?",
)
SIZE = (160, 46)


async def shoot(out_dir: str) -> None:
    config = SimConfig(
        schedule="cycle:2f,1d", speed=1.5, seed=0, per_request_spec_decode_metrics="detailed"
    )
    with start_in_thread(config, log_sink=lambda _line: None) as sim:
        port = LivePort(
            lambda: CollectorProcess(SessionConfig((Target(sim.url),)), state_factory(None))
        )
        app = SpecmonApp(port, settings=ChatSettings(max_tokens=600))
        try:
            async with app.run_test(size=SIZE) as pilot:
                while not port.connected:
                    await pilot.pause(0.05)
                for number, prompt in enumerate(PROMPTS, 1):
                    await pilot.click("#prompt")
                    for key in prompt:
                        await pilot.press(key if key != " " else "space")
                    await pilot.press("enter")
                    while True:
                        views = list(app.screen.query(AnswerView))
                        if len(views) == number and views[-1].finished:
                            break
                        await pilot.pause(0.05)
                    await pilot.pause(3.5)  # the numbers settle (vanilla verdict included)
                app.save_screenshot(filename="chat.svg", path=out_dir)
        finally:
            port.close()


if __name__ == "__main__":
    asyncio.run(shoot(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
