"""2048 + 1 in half precision: the sum rounds back to 2048."""

import numpy as np

a = np.float16(2048.0)
print(a + np.float16(1.0))
print(np.finfo(np.float16).eps)
