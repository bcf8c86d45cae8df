import os
os.environ["TF_CUDNN_USE_AUTOTUNE"] = "1"
