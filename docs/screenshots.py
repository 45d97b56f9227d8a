"""Screenshots of the built documentation, as a reader's browser shows it.

Renders pages with Chromium (QtWebEngine) off screen and saves one PNG per
screenful, scrolling down each page, so the pages can be looked at before a
release: the layout, the charts, tables that do not fit. Needs PyQt6 and
PyQt6-WebEngine (``python -m pip install PyQt6 PyQt6-WebEngine``); nothing
else in the project uses them.

Usage, after ``python -m sphinx -b html docs docs/_build/html``::

    QT_QPA_PLATFORM=offscreen QTWEBENGINE_CHROMIUM_FLAGS="--no-sandbox --disable-gpu" \\
        python docs/screenshots.py docs/_build/html shots index user_guide:4 benchmarks:6

Each page is a name under the HTML folder, with ``:N`` for its first N
screenfuls (3 by default).
"""

import sys
from pathlib import Path

WIDTH, HEIGHT, OVERLAP = 1280, 1000, 100


def main(html, out, pages):
    from PyQt6.QtCore import QTimer, QUrl
    from PyQt6.QtWebEngineWidgets import QWebEngineView
    from PyQt6.QtWidgets import QApplication

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    queue = [(name.split(":")[0], int(name.split(":")[1]) if ":" in name else 3) for name in pages]
    app = QApplication(sys.argv[:1])
    view = QWebEngineView()
    view.resize(WIDTH, HEIGHT)
    state = {}

    def next_page():
        if not queue:
            app.quit()
            return
        state["name"], state["screens"] = queue.pop(0)
        state["screen"] = 0
        view.load(QUrl.fromLocalFile(str((Path(html) / f"{state['name']}.html").resolve())))

    def scroll():
        top = state["screen"] * (HEIGHT - OVERLAP)
        # the page's height comes back with the scroll; the grab waits for the repaint
        view.page().runJavaScript(f"window.scrollTo(0, {top}); document.documentElement.scrollHeight",
                                  lambda height: QTimer.singleShot(700, lambda: save(height or 0)))

    def save(height):
        path = out / f"{state['name'].replace('/', '_')}_{state['screen']:02d}.png"
        view.grab().save(str(path))
        print(path)
        state["screen"] += 1
        if state["screen"] < state["screens"] and state["screen"] * (HEIGHT - OVERLAP) < height:
            scroll()
        else:
            next_page()

    view.loadFinished.connect(lambda ok: QTimer.singleShot(1500, scroll))  # fonts and MathJax settle
    view.show()
    next_page()
    app.exec()


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
