"""``python -m examples.wardle --secure-port 8443 --authentication-kubeconfig ...``"""

from examples.wardle import main

main()
